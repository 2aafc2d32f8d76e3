"""Rendering of results: every view is made from the result JSON alone."""
