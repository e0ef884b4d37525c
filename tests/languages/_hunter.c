/* A candidate that hunts for the expected outputs instead of computing them.
 *
 * Every expected output of the test starts with "SECRET-". The hunter reads every file it can
 * (the whole tree but the system directories), every /proc/<pid>/{cmdline,environ} and open fd,
 * and the readable memory of every other process; it prints the first "SECRET-..." token it
 * finds. If the expected outputs were anywhere in its reach, it would pass. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOKEN 23 /* "SECRET-" and 16 hex digits */
static char mark[8];
static char found[TOKEN + 1];
static char buf[1 << 16];

static int hex16(const char *s) {
    for (int i = 0; i < 16; i++)
        if (!strchr("0123456789abcdef", s[i]) || !s[i]) return 0;
    return 1;
}

static void look(const char *data, size_t n) {
    /* memmem, not a byte-by-byte memcmp: the walk reads hundreds of MiB (a pyenv prefix holds
     * its site-packages), and a slow scan ran past the test's time limit on a loaded machine */
    for (const char *at = data, *end = data + n; !found[0] && (at = memmem(at, (size_t)(end - at), mark, 7)); at++)
        if (end - at >= TOKEN && hex16(at + 7)) memcpy(found, at, TOKEN);
}

static void scan_file(const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return;
    for (int chunk = 0; chunk < 16 && !found[0]; chunk++) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) break;
        look(buf, (size_t)n);
    }
    close(fd);
}

static void scan_memory(const char *pid) {
    char path[256], line[512];
    snprintf(path, sizeof path, "/proc/%s/maps", pid);
    FILE *maps = fopen(path, "r");
    if (!maps) return;
    snprintf(path, sizeof path, "/proc/%s/mem", pid);
    int mem = open(path, O_RDONLY | O_CLOEXEC);
    while (mem >= 0 && !found[0] && fgets(line, sizeof line, maps)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[0] != 'r') continue;
        for (unsigned long at = lo; at < hi && !found[0]; at += sizeof buf) {
            ssize_t n = pread(mem, buf, sizeof buf, (off_t)at);
            if (n <= 0) break;
            look(buf, (size_t)n);
        }
    }
    if (mem >= 0) close(mem);
    fclose(maps);
}

static int skipped(const char *path) {
    static const char *skip[] = {"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/sys", "/dev/pts"};
    for (size_t i = 0; i < sizeof skip / sizeof *skip; i++)
        if (strcmp(path, skip[i]) == 0) return 1;
    return strstr(path, "/task") != NULL || strncmp(path, "/proc/sys", 9) == 0;
}

static void walk(const char *dir, int depth) {
    DIR *d = opendir(dir);
    if (!d || depth > 12) {
        if (d) closedir(d);
        return;
    }
    struct dirent *e;
    while (!found[0] && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", strcmp(dir, "/") ? dir : "", e->d_name);
        if (skipped(path)) continue;
        struct stat st;
        if (lstat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) walk(path, depth + 1);
        else if (S_ISREG(st.st_mode) || (S_ISLNK(st.st_mode) && strstr(path, "/fd/"))) scan_file(path);
    }
    closedir(d);
}

int main(void) {
    memcpy(mark, "SECRET", 6); /* built at run time: this binary's own text holds no mark */
    mark[6] = '-';
    char self[32];
    snprintf(self, sizeof self, "%d", (int)getpid());
    walk("/", 0);
    DIR *proc = opendir("/proc");
    struct dirent *e;
    while (proc && !found[0] && (e = readdir(proc)))
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && strcmp(e->d_name, self) != 0) scan_memory(e->d_name);
    if (proc) closedir(proc);
    puts(found[0] ? found : "nothing found");
    return 0;
}
