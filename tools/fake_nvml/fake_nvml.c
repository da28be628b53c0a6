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
 *
 * Memory that changes over time comes from FAKE_NVML_USED_FILE, a small text file that another process
 * (the measured child in the sampler's tests) rewrites; every memory, process and accounting query
 * re-reads it. pynvml calls release the GIL, so a sampler thread and a mark() from another thread can
 * be inside this library at once: the shared state is guarded by one mutex.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvml.h"

#define FAKE_MAX_DEVICES 16
#define FAKE_MAX_PROCESSES 64
#define FAKE_TEXT 96
#define FAKE_USED_FILE_MAX_BYTES 8192   /* a larger used file is ignored (read as "no change") */
#define FAKE_USED_MAX_LINES 128
#define FAKE_USED_LINE_MAX 160
/* Real drivers keep 4000 accounting records per device (nvidia-smi -q: "Accounting Mode Buffer Size");
 * the fake keeps one buffer of that size for all its devices. */
#define FAKE_ACCOUNTING_BUFFER 4000

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
    nvmlReturn_t memory_result;      /* FAKE_NVML_MEMORY_RESULT: v1 and v2 memory queries return this */
    nvmlReturn_t accounting_result;  /* FAKE_NVML_ACCOUNTING=unsupported / nopermission */
    nvmlEnableState_t accounting_mode;
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

/* One line of the used file: "DEVICE USED_BYTES [HIGH_WATER_BYTES [PID]]" (PID 0: not a process). */
struct used_line {
    unsigned int device;
    unsigned int pid;
    unsigned long long used_bytes;
    unsigned long long high_water_bytes;
};

/* The last complete read of the used file. A device it lists takes its allocated memory and its
 * process list from it alone; the others keep FAKE_NVML_PROCESSES. */
struct used_state {
    unsigned int line_count;
    struct used_line lines[FAKE_USED_MAX_LINES];
    unsigned char listed[FAKE_MAX_DEVICES];
    nvmlReturn_t error[FAKE_MAX_DEVICES]; /* "DEVICE error CODE": memory queries fail while the line is there */
};

/* The driver's accounting buffer: a per-(device, PID) high-water mark that outlives the process. */
struct accounting_record {
    unsigned int device;
    unsigned int pid;
    unsigned long long max_bytes;
    unsigned long long start_us;
    unsigned long long end_us;
    int running;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_used_path[4096];
static struct used_state g_used;       /* guarded by g_lock */
static int g_used_valid;               /* guarded by g_lock */
static struct accounting_record g_accounting[FAKE_ACCOUNTING_BUFFER]; /* guarded by g_lock */
static unsigned int g_accounting_count;
static unsigned int g_accounting_next; /* the oldest record once the buffer is full (circular, like the driver) */

static const char *env_or(const char *name, const char *fallback)
{
    const char *value = getenv(name);
    return (value != NULL && value[0] != '\0') ? value : fallback;
}

/* A whole decimal token (digits only: strtoull alone would take "-1" or " 7"). 1 on success. */
static int parse_u64_strict(const char *text, unsigned long long *value)
{
    char *end = NULL;

    if (text[0] < '0' || text[0] > '9') {
        return 0;
    }
    errno = 0;
    *value = strtoull(text, &end, 10);
    return errno == 0 && *end == '\0';
}

static unsigned long long parse_u64(const char *text, unsigned long long fallback)
{
    unsigned long long value;

    return parse_u64_strict(text, &value) ? value : fallback;
}

static unsigned long long now_us(void)
{
    struct timespec now;

    clock_gettime(CLOCK_REALTIME, &now);
    return (unsigned long long)now.tv_sec * 1000000ULL + (unsigned long long)now.tv_nsec / 1000ULL;
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

/* Caller holds g_lock. The record for (device, pid), or NULL. */
static struct accounting_record *find_accounting(unsigned int device, unsigned int pid)
{
    unsigned int r;

    for (r = 0; r < g_accounting_count; r++) {
        if (g_accounting[r].device == device && g_accounting[r].pid == pid) {
            return &g_accounting[r];
        }
    }
    return NULL;
}

/* Caller holds g_lock. Raise (device, pid)'s high-water mark; a new PID takes a slot, the oldest when full. */
static void account(unsigned int device, unsigned int pid, unsigned long long bytes, int running)
{
    struct accounting_record *record = find_accounting(device, pid);

    if (record == NULL) {
        if (g_accounting_count < FAKE_ACCOUNTING_BUFFER) {
            record = &g_accounting[g_accounting_count++];
        } else {
            record = &g_accounting[g_accounting_next];
            g_accounting_next = (g_accounting_next + 1) % FAKE_ACCOUNTING_BUFFER;
        }
        memset(record, 0, sizeof *record);
        record->device = device;
        record->pid = pid;
        record->start_us = now_us();
    }
    if (bytes > record->max_bytes) {
        record->max_bytes = bytes;
    }
    if (record->running && !running) {
        record->end_us = now_us();
    }
    record->running = running;
}

/* Splits line in place into whitespace-separated tokens; returns how many (at most max + 1). */
static unsigned int split_tokens(char *line, char **tokens, unsigned int max)
{
    unsigned int count = 0;
    char *cursor = line;

    for (;;) {
        while (*cursor == ' ' || *cursor == '\t' || *cursor == '\r') {
            *cursor++ = '\0';
        }
        if (*cursor == '\0' || *cursor == '#') {
            *cursor = '\0';
            return count;
        }
        if (count == max) {
            return max + 1; /* too many: the caller rejects the line */
        }
        tokens[count++] = cursor;
        while (*cursor != '\0' && *cursor != ' ' && *cursor != '\t' && *cursor != '\r') {
            cursor++;
        }
    }
}

/*
 * Parses a whole used file. Lines (each ending in a newline; '#' starts a comment):
 *     DEVICE USED_BYTES [HIGH_WATER_BYTES [PID]]
 *     DEVICE error NVML_RETURN_CODE
 * Returns 0 (the caller keeps its previous state) if any line is malformed, the last line has no
 * newline (a writer that did not rename a finished file) or there is no line at all.
 */
static int parse_used(const char *text, size_t length, struct used_state *out)
{
    size_t start = 0;
    int complete_lines = 0;

    memset(out, 0, sizeof *out);
    while (start < length) {
        const char *newline = memchr(text + start, '\n', length - start);
        char line[FAKE_USED_LINE_MAX];
        char *tokens[4];
        unsigned int count;
        size_t line_length;
        unsigned long long device;
        unsigned long long values[3] = {0, 0, 0};
        unsigned int t;

        if (newline == NULL) {
            return 0; /* a partial last line */
        }
        line_length = (size_t)(newline - (text + start));
        if (line_length >= sizeof line) {
            return 0;
        }
        memcpy(line, text + start, line_length);
        line[line_length] = '\0';
        start += line_length + 1;
        count = split_tokens(line, tokens, 4);
        if (count == 0) {
            continue; /* blank or comment */
        }
        if (count < 2 || count > 4 || !parse_u64_strict(tokens[0], &device) || device >= FAKE_MAX_DEVICES) {
            return 0;
        }
        if (strcmp(tokens[1], "error") == 0) {
            if (count != 3 || !parse_u64_strict(tokens[2], &values[0])) {
                return 0;
            }
            out->listed[device] = 1;
            out->error[device] = (nvmlReturn_t)values[0];
            complete_lines++;
            continue;
        }
        for (t = 1; t < count; t++) {
            if (!parse_u64_strict(tokens[t], &values[t - 1])) {
                return 0;
            }
        }
        if (out->line_count == FAKE_USED_MAX_LINES || values[2] > 0xFFFFFFFFULL) {
            return 0;
        }
        out->listed[device] = 1;
        out->lines[out->line_count].device = (unsigned int)device;
        out->lines[out->line_count].used_bytes = values[0];
        out->lines[out->line_count].high_water_bytes = values[1] > values[0] ? values[1] : values[0];
        out->lines[out->line_count].pid = (unsigned int)values[2];
        out->line_count++;
        complete_lines++;
    }
    return complete_lines > 0;
}

/*
 * Re-reads FAKE_NVML_USED_FILE (one open/read/close, a few µs). Missing, empty, too large, partial or
 * malformed: no change, the last complete read stays. Writers write a temporary file and rename(2) it
 * over the path, so a reader sees the old file or the new one, never a mix.
 */
static void refresh_used(void)
{
    char buffer[FAKE_USED_FILE_MAX_BYTES];
    struct used_state fresh;
    ssize_t length;
    unsigned int r;
    unsigned int l;
    int fd;

    if (g_used_path[0] == '\0') {
        return;
    }
    fd = open(g_used_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return;
    }
    length = read(fd, buffer, sizeof buffer);
    close(fd);
    if (length <= 0 || (size_t)length == sizeof buffer || !parse_used(buffer, (size_t)length, &fresh)) {
        return;
    }
    pthread_mutex_lock(&g_lock);
    g_used = fresh;
    g_used_valid = 1;
    /* A PID that left a listed device has ended; its record stays, as in the driver's buffer. */
    for (r = 0; r < g_accounting_count; r++) {
        unsigned int device = g_accounting[r].device;

        if (device < FAKE_MAX_DEVICES && fresh.listed[device] && g_accounting[r].running) {
            int present = 0;

            for (l = 0; l < fresh.line_count; l++) {
                present |= fresh.lines[l].device == g_accounting[r].device && fresh.lines[l].pid == g_accounting[r].pid
                           && fresh.lines[l].used_bytes > 0;
            }
            if (!present) {
                g_accounting[r].running = 0;
                g_accounting[r].end_us = now_us();
            }
        }
    }
    for (l = 0; l < fresh.line_count; l++) {
        if (fresh.lines[l].pid != 0) {
            account(fresh.lines[l].device, fresh.lines[l].pid, fresh.lines[l].high_water_bytes,
                    fresh.lines[l].used_bytes > 0);
        }
    }
    pthread_mutex_unlock(&g_lock);
}

/* Caller holds g_lock. The device's allocated bytes now, and the error the used file plays for it. */
static unsigned long long current_allocated(const struct nvmlDevice_st *device, nvmlReturn_t *error)
{
    unsigned long long allocated = 0;
    unsigned int l;

    *error = NVML_SUCCESS;
    if (!g_used_valid || !g_used.listed[device->index]) {
        return device->allocated_bytes;
    }
    *error = g_used.error[device->index];
    for (l = 0; l < g_used.line_count; l++) {
        if (g_used.lines[l].device == device->index) {
            allocated += g_used.lines[l].used_bytes;
        }
    }
    if (device->reserved_bytes + allocated > device->total_bytes) {
        allocated = device->total_bytes - device->reserved_bytes;
    }
    return allocated;
}

static void load_configuration(void)
{
    const char *names = env_or("FAKE_NVML_DEVICE_NAMES", "NVIDIA H100 80GB HBM3");
    const char *totals = env_or("FAKE_NVML_MEMORY_TOTAL_BYTES", "85520809984");
    const char *reserved = env_or("FAKE_NVML_MEMORY_RESERVED_BYTES", "566231040");
    const char *capability = env_or("FAKE_NVML_COMPUTE_CAPABILITY", "9.0");
    const char *mig = env_or("FAKE_NVML_MIG_MODE", "0");
    const char *memory_results = env_or("FAKE_NVML_MEMORY_RESULT", "0");
    const char *accounting = env_or("FAKE_NVML_ACCOUNTING", "0");
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
    pthread_mutex_lock(&g_lock);
    snprintf(g_used_path, sizeof g_used_path, "%s", env_or("FAKE_NVML_USED_FILE", ""));
    g_used_valid = 0;
    /* The configured processes are in the accounting buffer too, their bytes as the high-water mark. */
    for (p = 0; p < g_process_count; p++) {
        account(g_processes[p].device, g_processes[p].pid, g_processes[p].used_bytes, 1);
    }
    pthread_mutex_unlock(&g_lock);

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
        /* e.g. 3 (NOT_SUPPORTED): a unified-memory part with no framebuffer figures, v1 and v2 alike */
        list_item(memory_results, ',', i, item, sizeof item);
        device->memory_result = (nvmlReturn_t)parse_u64(item, 0);
        list_item(accounting, ',', i, item, sizeof item);
        device->accounting_mode = strcmp(item, "1") == 0 ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
        device->accounting_result = strcmp(item, "unsupported") == 0    ? NVML_ERROR_NOT_SUPPORTED
                                    : strcmp(item, "nopermission") == 0 ? NVML_ERROR_NO_PERMISSION
                                                                        : NVML_SUCCESS;
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
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
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

/* The device's allocated bytes now (from the used file when it lists the device), or the error to return. */
static nvmlReturn_t read_allocated(nvmlDevice_t device, unsigned long long *allocated)
{
    nvmlReturn_t error;

    refresh_used();
    pthread_mutex_lock(&g_lock);
    *allocated = current_allocated(device, &error);
    pthread_mutex_unlock(&g_lock);
    return error;
}

/* v1: `used` is reserved + allocated (nvml.h: "Sum of Reserved and Allocated device memory"). */
nvmlReturn_t DECLDIR nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    nvmlReturn_t result = check_device(device);
    unsigned long long allocated;

    if (result != NVML_SUCCESS) {
        return result;
    }
    if (device->memory_result != NVML_SUCCESS) {
        return device->memory_result;
    }
    if (memory == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    result = read_allocated(device, &allocated);
    if (result != NVML_SUCCESS) {
        return result;
    }
    memory->total = device->total_bytes;
    memory->used = device->reserved_bytes + allocated;
    memory->free = device->total_bytes - memory->used;
    return NVML_SUCCESS;
}

/* v2: reserved apart, `used` = allocated only (nvml.h nvmlMemory_v2_t; gpustat#141 saw the same on R515). */
nvmlReturn_t DECLDIR nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    nvmlReturn_t result = check_device(device);
    unsigned long long allocated;

    if (result != NVML_SUCCESS) {
        return result;
    }
    if (g_memory_v2_result != NVML_SUCCESS) {
        return g_memory_v2_result;
    }
    if (device->memory_result != NVML_SUCCESS) {
        return device->memory_result;
    }
    if (memory == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (memory->version != nvmlMemory_v2) {
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    result = read_allocated(device, &allocated);
    if (result != NVML_SUCCESS) {
        return result;
    }
    memory->total = device->total_bytes;
    memory->reserved = device->reserved_bytes;
    memory->used = allocated;
    memory->free = device->total_bytes - device->reserved_bytes - allocated;
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

/* Caller holds g_lock. Writes the device's running processes (up to capacity); returns how many there are. */
static unsigned int list_processes(const struct nvmlDevice_st *device, nvmlProcessInfo_t *infos, unsigned int capacity)
{
    unsigned int count = 0;
    unsigned int p;

    if (g_used_valid && g_used.listed[device->index]) {
        /* The used file's lines with a PID and memory still allocated; PID 0 lines are nobody's. */
        for (p = 0; p < g_used.line_count; p++) {
            const struct used_line *line = &g_used.lines[p];

            if (line->device == device->index && line->pid != 0 && line->used_bytes > 0) {
                if (infos != NULL && count < capacity) {
                    infos[count].pid = line->pid;
                    infos[count].usedGpuMemory = line->used_bytes;
                }
                count++;
            }
        }
    } else {
        for (p = 0; p < g_process_count; p++) {
            if (g_processes[p].device == device->index) {
                if (infos != NULL && count < capacity) {
                    infos[count].pid = g_processes[p].pid;
                    infos[count].usedGpuMemory = g_processes[p].used_bytes;
                }
                count++;
            }
        }
    }
    for (p = 0; infos != NULL && p < count && p < capacity; p++) {
        infos[p].gpuInstanceId = 0xFFFFFFFFU;
        infos[p].computeInstanceId = 0xFFFFFFFFU;
    }
    return count;
}

/* The size-probe protocol of the real library: too small a buffer → INSUFFICIENT_SIZE with the count. */
nvmlReturn_t DECLDIR nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                             nvmlProcessInfo_t *infos)
{
    nvmlReturn_t result = check_device(device);
    unsigned int needed;

    if (result != NVML_SUCCESS) {
        return result;
    }
    if (infoCount == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    refresh_used();
    pthread_mutex_lock(&g_lock);
    needed = list_processes(device, NULL, 0);
    if (needed > 0 && (infos == NULL || *infoCount < needed)) {
        result = NVML_ERROR_INSUFFICIENT_SIZE;
    } else if (needed > 0) {
        list_processes(device, infos, *infoCount);
    }
    pthread_mutex_unlock(&g_lock);
    *infoCount = needed;
    return result;
}

/* Accounting (nvml.h nvmlAccountingStats group): FAKE_NVML_ACCOUNTING per device. The error a device
 * gives for the buffer queries: its forced result, or NOT_SUPPORTED while the mode is disabled. */
static nvmlReturn_t accounting_usable(nvmlDevice_t device)
{
    nvmlReturn_t result = check_device(device);

    if (result != NVML_SUCCESS) {
        return result;
    }
    if (device->accounting_result != NVML_SUCCESS) {
        return device->accounting_result;
    }
    return device->accounting_mode == NVML_FEATURE_ENABLED ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t DECLDIR nvmlDeviceGetAccountingMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
    nvmlReturn_t result = check_device(device);

    if (result != NVML_SUCCESS) {
        return result;
    }
    if (device->accounting_result != NVML_SUCCESS) {
        return device->accounting_result;
    }
    if (mode == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *mode = device->accounting_mode;
    return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetAccountingBufferSize(nvmlDevice_t device, unsigned int *bufferSize)
{
    nvmlReturn_t result = accounting_usable(device);

    if (result != NVML_SUCCESS) {
        return result;
    }
    if (bufferSize == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *bufferSize = FAKE_ACCOUNTING_BUFFER;
    return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetAccountingPids(nvmlDevice_t device, unsigned int *count, unsigned int *pids)
{
    nvmlReturn_t result = accounting_usable(device);
    unsigned int needed = 0;
    unsigned int r;

    if (result != NVML_SUCCESS) {
        return result;
    }
    if (count == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    refresh_used();
    pthread_mutex_lock(&g_lock);
    for (r = 0; r < g_accounting_count; r++) {
        if (g_accounting[r].device == device->index) {
            if (pids != NULL && needed < *count) {
                pids[needed] = g_accounting[r].pid;
            }
            needed++;
        }
    }
    pthread_mutex_unlock(&g_lock);
    if (needed > 0 && (pids == NULL || *count < needed)) {
        result = NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *count = needed;
    return result;
}

/* maxMemoryUsage is the PID's high-water mark: the used file's HIGH_WATER_BYTES (or the most it was
 * seen using), or its FAKE_NVML_PROCESSES bytes. NOT_FOUND for a PID the buffer does not hold. */
nvmlReturn_t DECLDIR nvmlDeviceGetAccountingStats(nvmlDevice_t device, unsigned int pid, nvmlAccountingStats_t *stats)
{
    nvmlReturn_t result = accounting_usable(device);
    const struct accounting_record *record;

    if (result != NVML_SUCCESS) {
        return result;
    }
    if (stats == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    refresh_used();
    pthread_mutex_lock(&g_lock);
    record = find_accounting(device->index, pid);
    if (record == NULL) {
        result = NVML_ERROR_NOT_FOUND;
    } else {
        memset(stats, 0, sizeof *stats);
        stats->maxMemoryUsage = record->max_bytes;
        stats->startTime = record->start_us;
        stats->isRunning = record->running ? 1U : 0U;
        /* nvml.h: "reported as 0 if the process is not terminated" */
        stats->time = record->running ? 0ULL : (record->end_us - record->start_us) / 1000ULL;
    }
    pthread_mutex_unlock(&g_lock);
    return result;
}
