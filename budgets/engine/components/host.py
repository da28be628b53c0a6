"""Host RAM and disk.

Loading safetensors memory-maps the files, so RAM holds about one shard at a time (HF shards are
≤ 5 GB); torch.load of a .bin checkpoint needs the whole file. Disk holds the model files, a
conversion (quantized copy) and, for training, a checkpoint with optimizer states.
"""

from __future__ import annotations

SHARD_BYTES = 5 * 10**9  # default max_shard_size of save_pretrained
PROCESS_BASE_BYTES = 3 * 10**9  # python + torch + CUDA libraries, per process (resident)


def host_ram(device: str, checkpoint_bytes: int, processes: int, device_peak_bytes: int) -> int:
    if device == "cpu":
        return device_peak_bytes + PROCESS_BASE_BYTES
    return processes * (PROCESS_BASE_BYTES + min(checkpoint_bytes, SHARD_BYTES))


def disk(checkpoint_bytes: int, converted_bytes: int, training_checkpoint_bytes: int) -> int:
    return checkpoint_bytes + converted_bytes + training_checkpoint_bytes
