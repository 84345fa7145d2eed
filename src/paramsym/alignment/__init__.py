"""Aligning and merging two models modulo their exact parameter symmetries (issue 11).

* :mod:`.arch` — what can be aligned: unit groups (hidden units, FFN units, heads), attention
  layers and the function of an MLP chain or a Hugging Face model;
* :mod:`.matching` — weight matching: permutations by linear assignment (Git Re-Basin), positive
  rescaling (a per-unit quartic), per-head GL(d_k)/GL(d_v) (Sylvester least squares);
* :mod:`.path` — the linear path, its loss barrier, relative output error;
* :mod:`.align` — the stages before / permutation / full, applied through the catalogue actions;
* :mod:`.io` — loading two models from files, choosing data, writing result/report/plot/merged.
"""
