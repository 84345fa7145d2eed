"""The one run verb: run directories, provenance, the kind table, execute, reports, reuse."""
