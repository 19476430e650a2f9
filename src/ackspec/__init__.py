"""ackspec: a conformance suite for message delivery guarantees.

Folders: ``spec`` (the requirement catalogue, the one source of truth),
``reference`` (reference broker and client), ``adapters`` (drivers for systems
under test), ``conformance`` (the pytest suite and plugin), ``pipeline`` (PySpark
history checks and the traceability report), ``history`` and ``results`` (the
file formats those parts exchange), ``cli`` (the command line).
"""

__version__ = "0.1.0"
