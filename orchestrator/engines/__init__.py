"""Everything specsweep knows about one engine, one package each, reached through the :class:`Engine`
protocol and the registry (:func:`get_engine`, :func:`engine_names`).

May use: the metric and load types their parsers fill, the simulator's dialect seam and the ground;
never the sweep loop, a host, a service or a launcher (kept by import-linter).
"""
