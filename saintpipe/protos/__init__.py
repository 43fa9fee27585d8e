"""Generated protobuf and gRPC modules, produced from protos/ and committed (checked by tests/unit/protos/test_protos_generated.py)."""
