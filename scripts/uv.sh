# Sourced by ./taskbench and ./run-tests: sets UV to a uv binary, installing one privately if needed.
# Needs only python3 (3.11+); nothing is installed outside this checkout's .taskbench/ folder.
here=$(cd "$(dirname "$0")" && pwd)
UV_VERSION=0.13.8
if command -v uv >/dev/null 2>&1; then
  UV=$(command -v uv)
elif [ -x "$here/.taskbench/bootstrap/bin/uv" ]; then
  UV="$here/.taskbench/bootstrap/bin/uv"
else
  echo "taskbench: installing uv $UV_VERSION into $here/.taskbench/bootstrap (once)" >&2
  python3 -m venv "$here/.taskbench/bootstrap"
  "$here/.taskbench/bootstrap/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
  UV="$here/.taskbench/bootstrap/bin/uv"
fi
export UV
