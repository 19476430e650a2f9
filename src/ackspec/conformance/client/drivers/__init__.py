"""Drivers that put client libraries under test: stomp.py, python-qpid-proton, the JSON-lines shim."""
