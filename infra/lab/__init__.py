"""The lab's infrastructure: the simulated reader (an OpenAI-compatible test endpoint, never a
client) and Elasticsearch/JDK provisioning for tests and benches. Never imported by the product."""
