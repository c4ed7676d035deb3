/* out_file.h - a command's --out file, written under a temporary name and
 * renamed onto its path only once something was written to it.
 *
 *   out_file_open(path)   creates "DIR/.NAME.XXXXXX" beside path (same
 *                         folder, so the rename is atomic); NULL path: stdout
 *   ... the command writes, then fcloses the FILE (or its interrupt_stream) ...
 *   out_file_finish()     renames the temporary file onto path when it holds
 *                         any bytes, else removes it
 *
 * So a refusal leaves no file and keeps an existing file at path untouched,
 * and a reader never sees a half-written output under path. The command
 * passes discard when it failed (an error part way, after some lines): its
 * file is removed too; a finished or interrupted run (summary written) keeps
 * its lines.
 *
 * A path that exists and is not a regular file (/dev/null, a fifo) is
 * written directly: renaming onto it would replace the device.
 *
 * Ownership: out_file_open's FILE is the caller's to fclose before
 * out_file_finish; the out_file owns the two names until out_file_finish.
 */
#ifndef RKV_OUT_FILE_H
#define RKV_OUT_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct out_file {
    char *path; /* NULL: stdout */
    char *tmp;  /* the temporary name; NULL once finished */
} out_file;

/* The stream to write to (stdout when path is NULL), or NULL with a message
 * in err ("cannot write 'PATH': REASON"). */
FILE *out_file_open(out_file *of, const char *path, char *err, size_t errlen);

/* After the stream was closed: rename or remove (see above); discard forces
 * removal. 0, or -1 with a message in err. Safe to call twice. */
int out_file_finish(out_file *of, bool discard, char *err, size_t errlen);

#endif
