"""Budget components, one module each: weights, kv_cache, activations, training (gradients,
optimizer state), workspace, runtime, fragmentation and host. Each function is pure and returns
byte counts (`Range` where the value is uncertain)."""
