"""The ``epochgc`` command line: one module per noun (``gc``, ``spark``,
``topic``, ``epoch``, ``controller``, ``partition``, ``node``, ``store``),
each registering its commands. A command parses its arguments, calls one
function of the package below and prints; the logic lives in the packages.

Imports anything below it; nothing imports ``cli``.
"""
