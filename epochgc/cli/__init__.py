"""The ``epochgc`` command line: one module per noun (``gc``, ``spark``,
``topic``, ``epoch``, ``controller``, ``partition``, ``node``, ``store``,
``tool``), each registering its commands; ``arguments`` holds how they
declare them, ``output`` how they print, and ``main`` the parser and the
entry point. A command parses its
arguments, calls one function of the package below and prints; the logic
lives in the packages.

Imports anything below it; nothing imports ``cli`` but the entry points.
"""
