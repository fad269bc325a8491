"""The lab's infrastructure, never imported by the product.

The simulated reader (an OpenAI-compatible test endpoint, never a client) and the
Elasticsearch/JDK provisioning that tests and benches start nodes with.
"""
