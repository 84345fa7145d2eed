"""paramsym: symmetry in neural-network parameter spaces.

Three questions about real PyTorch models:

1. which transformations of the weights leave the function unchanged (``paramsym.discovery``),
2. which parameters carry a symmetry of the learned function (``paramsym.attribution``),
3. what an equivariant attention layer looks like (``paramsym.attention``).

Docstrings cite the source papers as [Discovery], [Attribution] and [Attention] with the papers'
own section numbers; titles, authors and a section-to-module map are in ``docs/papers.md``.
"""

__version__ = "0.1.0"
