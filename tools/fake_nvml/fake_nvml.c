/*
 * A stand-in libnvidia-ml.so.1 for tests on machines without an NVIDIA GPU.
 *
 * It is compiled with -Werror against the official nvml.h (PyPI nvidia-nvml-dev-cu12), so every
 * prototype and struct layout below is checked by the compiler against NVIDIA's header: a wrong
 * signature is a "conflicting types" error, not a silent ABI mismatch. The real nvidia-ml-py
 * bindings (`pynvml`) load it through LD_LIBRARY_PATH and exercise their own ctypes code against
 * it (struct versions, the INSUFFICIENT_SIZE dance, error mapping). It proves that vramplan's probe
 * reads NVML correctly; it says nothing about how a real GPU or driver behaves.
 *
 * Values come from the environment, read at nvmlInit time (defaults: two H100 80GB HBM3, driver
 * 550.54.15, CUDA 12.4). See tools/fake_nvml/README.md for the variables.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml.h"

#define FAKE_MAX_DEVICES 16
#define FAKE_MAX_PROCESSES 64
#define FAKE_TEXT 96

struct nvmlDevice_st {
    unsigned int index;
    char name[FAKE_TEXT];
    char uuid[FAKE_TEXT];
    unsigned long long total_bytes;
    unsigned long long reserved_bytes;
    unsigned long long allocated_bytes;
    int cc_major;
    int cc_minor;
    int mig_supported;
    unsigned int mig_current;
    unsigned int mig_pending;
};

struct fake_process {
    unsigned int device;
    unsigned int pid;
    unsigned long long used_bytes;
};

static struct nvmlDevice_st g_devices[FAKE_MAX_DEVICES];
static unsigned int g_device_count;
static struct fake_process g_processes[FAKE_MAX_PROCESSES];
static unsigned int g_process_count;
static char g_driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
static int g_cuda_version;
static nvmlReturn_t g_memory_v2_result;
static unsigned int g_init_refcount;

static const char *env_or(const char *name, const char *fallback)
{
    const char *value = getenv(name);
    return (value != NULL && value[0] != '\0') ? value : fallback;
}

static unsigned long long parse_u64(const char *text, unsigned long long fallback)
{
    char *end = NULL;
    unsigned long long value;

    errno = 0;
    value = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0') {
        return fallback;
    }
    return value;
}

/* The index-th item of a sep-separated list; the last item repeats for higher indexes. */
static void list_item(const char *list, char sep, unsigned int index, char *out, size_t out_size)
{
    const char *start = list;
    const char *end;
    unsigned int i = 0;
    size_t length;

    for (;;) {
        end = strchr(start, sep);
        if (i == index || end == NULL) {
            break;
        }
        start = end + 1;
        i++;
    }
    length = end != NULL ? (size_t)(end - start) : strlen(start);
    if (length >= out_size) {
        length = out_size - 1;
    }
    memcpy(out, start, length);
    out[length] = '\0';
}

static void load_processes(void)
{
    /* FAKE_NVML_PROCESSES="DEVICE:PID:BYTES,DEVICE:PID:BYTES" */
    const char *spec = env_or("FAKE_NVML_PROCESSES", "");
    const char *cursor = spec;

    g_process_count = 0;
    while (*cursor != '\0' && g_process_count < FAKE_MAX_PROCESSES) {
        unsigned int device = 0;
        unsigned int pid = 0;
        unsigned long long used = 0;
        int consumed = 0;

        if (sscanf(cursor, "%u:%u:%llu%n", &device, &pid, &used, &consumed) != 3) {
            break;
        }
        g_processes[g_process_count].device = device;
        g_processes[g_process_count].pid = pid;
        g_processes[g_process_count].used_bytes = used;
        g_process_count++;
        cursor += consumed;
        if (*cursor == ',') {
            cursor++;
        }
    }
}

static void load_configuration(void)
{
    const char *names = env_or("FAKE_NVML_DEVICE_NAMES", "NVIDIA H100 80GB HBM3");
    const char *totals = env_or("FAKE_NVML_MEMORY_TOTAL_BYTES", "85520809984");
    const char *reserved = env_or("FAKE_NVML_MEMORY_RESERVED_BYTES", "566231040");
    const char *capability = env_or("FAKE_NVML_COMPUTE_CAPABILITY", "9.0");
    const char *mig = env_or("FAKE_NVML_MIG_MODE", "0");
    char item[FAKE_TEXT];
    unsigned int i;
    unsigned int p;

    g_device_count = (unsigned int)parse_u64(env_or("FAKE_NVML_DEVICE_COUNT", "2"), 2);
    if (g_device_count > FAKE_MAX_DEVICES) {
        g_device_count = FAKE_MAX_DEVICES;
    }
    snprintf(g_driver_version, sizeof g_driver_version, "%s", env_or("FAKE_NVML_DRIVER_VERSION", "550.54.15"));
    g_cuda_version = (int)parse_u64(env_or("FAKE_NVML_CUDA_DRIVER_VERSION", "12040"), 12040);
    /* e.g. 13 (FUNCTION_NOT_FOUND) to play a pre-R510 driver without nvmlDeviceGetMemoryInfo_v2 */
    g_memory_v2_result = (nvmlReturn_t)parse_u64(env_or("FAKE_NVML_MEMORY_V2_RESULT", "0"), 0);
    load_processes();

    for (i = 0; i < g_device_count; i++) {
        struct nvmlDevice_st *device = &g_devices[i];

        memset(device, 0, sizeof *device);
        device->index = i;
        list_item(names, '|', i, device->name, sizeof device->name);
        snprintf(device->uuid, sizeof device->uuid, "GPU-fa4e0000-0000-4000-8000-%012x", i);
        list_item(totals, ',', i, item, sizeof item);
        device->total_bytes = parse_u64(item, 85520809984ULL);
        list_item(reserved, ',', i, item, sizeof item);
        device->reserved_bytes = parse_u64(item, 0);
        if (sscanf(capability, "%d.%d", &device->cc_major, &device->cc_minor) != 2) {
            device->cc_major = 9;
            device->cc_minor = 0;
        }
        device->mig_supported = strcmp(mig, "unsupported") != 0;
        device->mig_current = device->mig_pending = (strcmp(mig, "1") == 0) ? 1U : 0U;
        for (p = 0; p < g_process_count; p++) {
            if (g_processes[p].device == i) {
                device->allocated_bytes += g_processes[p].used_bytes;
            }
        }
        if (device->reserved_bytes + device->allocated_bytes > device->total_bytes) {
            device->allocated_bytes = device->total_bytes - device->reserved_bytes;
        }
    }
}

static nvmlReturn_t check_device(nvmlDevice_t device)
{
    if (g_init_refcount == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (device == NULL || device < &g_devices[0] || device >= &g_devices[g_device_count]) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    return NVML_SUCCESS;
}

static nvmlReturn_t copy_text(const char *text, char *out, unsigned int length)
{
    if (out == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (strlen(text) + 1 > length) {
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    memcpy(out, text, strlen(text) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlInitWithFlags(unsigned int flags)
{
    /* FAKE_NVML_INIT_RESULT=9 plays "driver not loaded" (the library is there, the kernel module is not). */
    nvmlReturn_t forced = (nvmlReturn_t)parse_u64(env_or("FAKE_NVML_INIT_RESULT", "0"), 0);

    (void)flags;
    if (forced != NVML_SUCCESS) {
        return forced;
    }
    if (g_init_refcount == 0) {
        load_configuration();
    }
    g_init_refcount++;
    return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlInit_v2(void)
{
    return nvmlInitWithFlags(0);
}

nvmlReturn_t DECLDIR nvmlShutdown(void)
{
    if (g_init_refcount == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    g_init_refcount--;
    return NVML_SUCCESS;
}

const DECLDIR char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
    default: return "Unknown Error (fake NVML)";
    }
}

nvmlReturn_t DECLDIR nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    if (g_init_refcount == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    return copy_text(g_driver_version, version, length);
}

nvmlReturn_t DECLDIR nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    char text[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE + 8];

    if (g_init_refcount == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    snprintf(text, sizeof text, "%s.%s", NVML_API_VERSION_STR, g_driver_version);
    return copy_text(text, version, length);
}

nvmlReturn_t DECLDIR nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    if (g_init_refcount == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (cudaDriverVersion == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *cudaDriverVersion = g_cuda_version;
    return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
}

nvmlReturn_t DECLDIR nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    if (g_init_refcount == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (deviceCount == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *deviceCount = g_device_count;
    return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (g_init_refcount == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (device == NULL || index >= g_device_count) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *device = &g_devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    unsigned int i;

    if (g_init_refcount == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (uuid == NULL || device == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    for (i = 0; i < g_device_count; i++) {
        if (strcmp(g_devices[i].uuid, uuid) == 0) {
            *device = &g_devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t DECLDIR nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    nvmlReturn_t result = check_device(device);

    if (result != NVML_SUCCESS) {
        return result;
    }
    if (index == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *index = device->index;
    return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    nvmlReturn_t result = check_device(device);

    return result != NVML_SUCCESS ? result : copy_text(device->name, name, length);
}

nvmlReturn_t DECLDIR nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    nvmlReturn_t result = check_device(device);

    return result != NVML_SUCCESS ? result : copy_text(device->uuid, uuid, length);
}

/* v1: `used` is reserved + allocated (nvml.h: "Sum of Reserved and Allocated device memory"). */
nvmlReturn_t DECLDIR nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    nvmlReturn_t result = check_device(device);

    if (result != NVML_SUCCESS) {
        return result;
    }
    if (memory == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    memory->total = device->total_bytes;
    memory->used = device->reserved_bytes + device->allocated_bytes;
    memory->free = device->total_bytes - memory->used;
    return NVML_SUCCESS;
}

/* v2: reserved apart, `used` = allocated only (nvml.h nvmlMemory_v2_t; gpustat#141 saw the same on R515). */
nvmlReturn_t DECLDIR nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    nvmlReturn_t result = check_device(device);

    if (result != NVML_SUCCESS) {
        return result;
    }
    if (g_memory_v2_result != NVML_SUCCESS) {
        return g_memory_v2_result;
    }
    if (memory == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (memory->version != nvmlMemory_v2) {
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    memory->total = device->total_bytes;
    memory->reserved = device->reserved_bytes;
    memory->used = device->allocated_bytes;
    memory->free = device->total_bytes - device->reserved_bytes - device->allocated_bytes;
    return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    nvmlReturn_t result = check_device(device);

    if (result != NVML_SUCCESS) {
        return result;
    }
    if (major == NULL || minor == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *major = device->cc_major;
    *minor = device->cc_minor;
    return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode)
{
    nvmlReturn_t result = check_device(device);

    if (result != NVML_SUCCESS) {
        return result;
    }
    if (!device->mig_supported) {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    if (currentMode == NULL || pendingMode == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *currentMode = device->mig_current;
    *pendingMode = device->mig_pending;
    return NVML_SUCCESS;
}

/* The size-probe protocol of the real library: too small a buffer → INSUFFICIENT_SIZE with the count. */
nvmlReturn_t DECLDIR nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                             nvmlProcessInfo_t *infos)
{
    nvmlReturn_t result = check_device(device);
    unsigned int needed = 0;
    unsigned int written = 0;
    unsigned int p;

    if (result != NVML_SUCCESS) {
        return result;
    }
    if (infoCount == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    for (p = 0; p < g_process_count; p++) {
        needed += g_processes[p].device == device->index;
    }
    if (needed == 0) {
        *infoCount = 0;
        return NVML_SUCCESS;
    }
    if (infos == NULL || *infoCount < needed) {
        *infoCount = needed;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (p = 0; p < g_process_count; p++) {
        if (g_processes[p].device != device->index) {
            continue;
        }
        infos[written].pid = g_processes[p].pid;
        infos[written].usedGpuMemory = g_processes[p].used_bytes;
        infos[written].gpuInstanceId = 0xFFFFFFFFU;
        infos[written].computeInstanceId = 0xFFFFFFFFU;
        written++;
    }
    *infoCount = written;
    return NVML_SUCCESS;
}
