"""saintpipe's services: the dataset store, samplers, the subgraph pool and the feature shards."""
