"""[Discovery] §6.3, Fig. 3: a learned action on one FFN unit and its compensators of a pretrained
transformer (all-MiniLM-L6-v2 for the paper's Pythia-1B), installed in the full model.

:mod:`.run` — the configuration, the run and its report; :mod:`.claims` — the claims of the
learned action (drift ratios, motion, stored composition).
"""
