"""Remote executors' mechanisms: the instance CA and its certificates, and mutual TLS."""
