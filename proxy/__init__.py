"""ctxproxy: a context-management proxy for LLM agents."""

__version__ = "0.1.0"
