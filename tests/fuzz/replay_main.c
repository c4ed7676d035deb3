/* replay_main.c - a main() for the fuzz targets in builds without libFuzzer:
 * runs each file named on the command line (or each file of each directory)
 * through LLVMFuzzerTestOneInput once, so the corpus is a regression suite in
 * the ordinary and sanitizer builds. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rkv_core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    char *buf, err[512];
    size_t n;
    if (rkv_read_file(path, 0, &buf, &n, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    LLVMFuzzerTestOneInput((const uint8_t *)buf, n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int bad = 0, files = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            while (d && (e = readdir(d))) {
                if (e->d_name[0] == '.') continue;
                char p[4096];
                snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
                bad += replay_file(p);
                files++;
            }
            if (d) closedir(d);
        } else {
            bad += replay_file(argv[i]);
            files++;
        }
    }
    printf("replayed %d inputs\n", files);
    return bad || files == 0;
}
