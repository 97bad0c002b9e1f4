"""The log's store, the sandbox, invocation, executors, LLM providers, blobs."""
