"""The per-command run kinds and their presets (``paramsym census``, ``affine``, ``compensate``,
``teleport``, ``align``, and the pure-math ``group`` / ``attention`` commands), and
:mod:`.catalog`, every command's presets for ``paramsym list``.

Each kind module holds its typed configuration (with ``quick()``), ``run(cfg, out, *, progress)``
and ``render(run_dir)``; the run verb (:mod:`paramsym.runs`) loads it by its dotted path.
"""
