/*
 * Prints, as JSON, the sizes and field offsets of the NVML structs vramplan reads, as the official
 * nvml.h lays them out. tests/workers compare them with nvidia-ml-py's ctypes structs, so a pynvml
 * upgrade that disagrees with the header fails a test instead of corrupting memory on a GPU node.
 */
#include <stddef.h>
#include <stdio.h>

#include "nvml.h"

int main(void)
{
    printf("{\n");
    printf("  \"nvmlMemory_v2\": %u,\n", (unsigned int)nvmlMemory_v2);
    printf("  \"NVML_DEVICE_NAME_V2_BUFFER_SIZE\": %d,\n", NVML_DEVICE_NAME_V2_BUFFER_SIZE);
    printf("  \"NVML_DEVICE_UUID_V2_BUFFER_SIZE\": %d,\n", NVML_DEVICE_UUID_V2_BUFFER_SIZE);
    printf("  \"NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE\": %d,\n", NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE);
    printf("  \"structs\": {\n");
    printf("    \"c_nvmlMemory_t\": {\"size\": %zu, \"total\": %zu, \"free\": %zu, \"used\": %zu},\n",
           sizeof(nvmlMemory_t), offsetof(nvmlMemory_t, total), offsetof(nvmlMemory_t, free),
           offsetof(nvmlMemory_t, used));
    printf("    \"c_nvmlMemory_v2_t\": {\"size\": %zu, \"version\": %zu, \"total\": %zu, \"reserved\": %zu, "
           "\"free\": %zu, \"used\": %zu},\n",
           sizeof(nvmlMemory_v2_t), offsetof(nvmlMemory_v2_t, version), offsetof(nvmlMemory_v2_t, total),
           offsetof(nvmlMemory_v2_t, reserved), offsetof(nvmlMemory_v2_t, free), offsetof(nvmlMemory_v2_t, used));
    printf("    \"c_nvmlProcessInfo_v3_t\": {\"size\": %zu, \"pid\": %zu, \"usedGpuMemory\": %zu, "
           "\"gpuInstanceId\": %zu, \"computeInstanceId\": %zu}\n",
           sizeof(nvmlProcessInfo_t), offsetof(nvmlProcessInfo_t, pid), offsetof(nvmlProcessInfo_t, usedGpuMemory),
           offsetof(nvmlProcessInfo_t, gpuInstanceId), offsetof(nvmlProcessInfo_t, computeInstanceId));
    /* The accounting high-water mark the runner reads after a job (workers/runner/sampling.py). */
    printf("    ,\"c_nvmlAccountingStats_t\": {\"size\": %zu, \"gpuUtilization\": %zu, \"memoryUtilization\": %zu, "
           "\"maxMemoryUsage\": %zu, \"time\": %zu, \"startTime\": %zu, \"isRunning\": %zu}\n",
           sizeof(nvmlAccountingStats_t), offsetof(nvmlAccountingStats_t, gpuUtilization),
           offsetof(nvmlAccountingStats_t, memoryUtilization), offsetof(nvmlAccountingStats_t, maxMemoryUsage),
           offsetof(nvmlAccountingStats_t, time), offsetof(nvmlAccountingStats_t, startTime),
           offsetof(nvmlAccountingStats_t, isRunning));
    printf("  }\n}\n");
    return 0;
}
