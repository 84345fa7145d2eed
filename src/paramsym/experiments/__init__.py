"""Experiments: one module per paper artefact, each a ``Config`` dataclass and a
``run(cfg, out) -> Result`` that writes a run directory."""
