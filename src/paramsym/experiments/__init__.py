"""The papers' artefacts, one sub-package per paper section (:mod:`.discovery`, :mod:`.attribution`):
each artefact composes library calls into the paper's run and holds its configuration, its run and
report, its claims and its generated docs blocks in one place."""
