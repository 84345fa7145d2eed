"""Learned symmetry discovery: objectives, problems (reference targets), training, command."""
