"""A soak (``taskbench run --soak``): one steady load for a long time, sampled at bounded resolution,
each series' growth fitted and judged against a bound (``plan``, ``series``, ``fit``, ``sampler``)."""
