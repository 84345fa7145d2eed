"""[Discovery] Table 1 (§6.2): hybrid vs finite objectives on the scalar sigmoid network.

:mod:`.run` — the configuration (``quick()``; the paper's run), the run and its report;
:mod:`.claims` — the paper's numbers as claims and the generated docs block (``objectives``).
"""
