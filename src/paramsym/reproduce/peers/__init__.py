"""Peer comparisons run by ``paramsym reproduce``: the ``rebasin`` package (:mod:`.rebasin`) and the alignment diagnostics beside it (:mod:`.align_diagnostics`)."""
