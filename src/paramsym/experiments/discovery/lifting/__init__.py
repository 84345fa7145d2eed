"""[Discovery] §6.3, Fig. 2(c): one unit (its boundary output) vs all 88 weights of the ReLU
(2, 8, 8, 1) network, full-network error at matched displacement.

:mod:`.run` — the configuration, the run and its report; :mod:`.claims` — the claim and the
generated docs block (``lifting``).
"""
