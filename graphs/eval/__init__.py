"""Evaluations a user runs on their own system and gold.

Retrieval (`eval retrieval`), snippet selection (`eval snippets`) and the support check (`eval
support`). The methods' evaluations are the lab's (lab/trials).
"""
