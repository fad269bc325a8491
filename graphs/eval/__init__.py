"""Evaluations a user runs on their own system and gold: retrieval (`eval retrieval`), snippet
selection (`eval snippets`), the support check (`eval support`). The methods' evaluations are the
lab's (graphs/lab/eval).
"""
