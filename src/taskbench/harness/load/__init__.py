"""The load of a case over time: its phases (``--phases``), the search for the highest sustainable
rate (``--find-max-rate``), and the backlog figures both are judged by."""
