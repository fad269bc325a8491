"""The QA graph's nodes, one per module, and the state they share."""
