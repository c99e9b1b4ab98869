/*
 * run_dir.h - the output folder of a training run and the run record.
 *
 * A folder "holds a run" when it contains any file sa1b-train writes for a
 * run: latest, log.jsonl, model-STEP.safetensors, state-STEP.bin (or one of
 * their temporaries, NAME.tmp or NAME.tmp.PID.N).  sa1b-train refuses to start a new run in
 * such a folder unless told to resume it or to start afresh (--overwrite,
 * which removes exactly these files and nothing else).  The run that writes
 * in a folder holds the flock(2) lock of its file TR_RUN_LOCK (not a run
 * file: it stays).
 *
 * The run record: the settings that shape the model, the data and the
 * schedule, as text lines "key=value\n" (values percent-encoded, so that
 * any path fits), stored in the state file's __metadata__ as "run.<key>"
 * entries and read back on --resume.
 */
#ifndef SA1B_TRAINER_RUN_DIR_H
#define SA1B_TRAINER_RUN_DIR_H

#include <stddef.h>
#include <stdio.h>

/* 1 when dir holds a run (what: a short description such as "latest step
 * 30, 6 checkpoint files"), 0 when it does not or does not exist, -1 when
 * it cannot be read (what: the reason). */
int tr_run_dir_holds_run(const char *dir, char *what, size_t what_len);

/* 1 when the run files of dir are what a run killed before its first
 * checkpoint leaves, and nothing more: temporaries, and a log.jsonl (a
 * regular file) of sa1b-train's step records only, its last line perhaps
 * cut short, and beside that log a first checkpoint cut short: one model
 * file without its state, or, where cut >= 0 (the caller found the
 * checkpoint of step cut missing a rank's part of its state: a --zero 1
 * job killed between its ranks' writes), that checkpoint's files; also
 * when dir holds no run file or does not exist.  0 when one is more
 * (latest, a checkpoint's model or state file, another program's log: what
 * names it), -1 when dir or the log cannot be read (what: the reason).
 * --auto-resume replaces such a run, and no other. */
int tr_run_dir_killed_start(const char *dir, long cut, char *what, size_t what_len);

/* The step N of the one checkpoint, whole or cut short, that a run killed
 * in its first leaves: dir has no latest, its log (if any) is sa1b-train's
 * and its other run files, but for temporaries, are regular files of step
 * N alone: model-N.safetensors (*model), state-N.bin (*state), and ranks'
 * parts state-N.rR.bin (*part: the lowest such R, -1 when none).  -1
 * otherwise. */
long tr_run_dir_one_checkpoint(const char *dir, int *model, int *state, long *part);

#define TR_RUN_LOCK ".sa1b-train.lock"

/* The step dir/latest names: the step, or -1 with the line that says why
 * in err (cannot be read, not a regular file, not a step number). */
long tr_run_read_latest(const char *dir, char *err, size_t err_len);

/* The steps N of which dir holds both files of a checkpoint,
 * model-N.safetensors and state-N.bin, newest first, in *steps (malloc'd;
 * NULL when none): their number, or -1 with errno when dir cannot be read. */
long tr_run_dir_checkpoints(const char *dir, long **steps);

/* Whether the checkpoint of step in dir is intact, as far as its files
 * tell without the model: each read whole and parsed (the safetensors
 * header and sizes); the model file, of format TR_CKPT_FORMAT_MODEL (or
 * none, an older file), with a valid configuration, prompt.pe_gaussian and
 * every F32 tensor finite; the state file, of format TR_CKPT_FORMAT_STATE,
 * of this step and the model's configuration, with its optimizer step,
 * generator state and data position, every F32 tensor finite; and where
 * the step has a rank's part of the optimizer state (state-N.r1.bin:
 * --zero 1 under mpirun), the part of every rank 1..world-1, each such a
 * state file.  A whole file of another format (a later version's, a
 * --dump-step dump) is no damage: intact here, refused by the loader.  1
 * intact; 0 damaged, with why naming the file and what is wrong with it. */
int tr_run_checkpoint_intact(const char *dir, long step, int world, char *why, size_t why_len);

/* Names step in dir/latest (a temporary renamed over it, synced, and the
 * folder synced; own_tmp: a temporary of this process's own, for
 * processes that write it at once): 0, or -1 with errno. */
int tr_run_write_latest(const char *dir, long step, int own_tmp);

/* fopen(path, "r") of a run file (latest, log.jsonl) that is a regular
 * file: NULL with errno set, EINVAL when path is a FIFO, a device or a
 * folder (never waited on: a FIFO named latest hung every run in its
 * folder). */
FILE *tr_run_dir_fopen(const char *path);

/* Removes the run's files from dir (the files tr_run_dir_holds_run counts;
 * nothing else), once each is known to be removable (none a folder; dir
 * writable): nothing is removed when one is not.  latest goes first,
 * log.jsonl last.  0, or -1 with err naming the file that could not go. */
int tr_run_dir_clear(const char *dir, char *err, size_t err_len);

/* Removes the temporaries of run files (NAME.tmp, NAME.tmp.PID.N) from
 * dir: those a killed run left, to be called by the run that holds the
 * folder's lock.  0, or -1 with err naming the file that could not go. */
int tr_run_dir_remove_temps(const char *dir, char *err, size_t err_len);

/* 1 when path is (the same device and inode as) one of the run's files in
 * dir, the files tr_run_dir_clear removes (name: its name in dir); else 0. */
int tr_run_dir_has_file(const char *dir, const char *path, char *name, size_t name_len);

/* The PNG overlays of --export in dir ("NNNNN-iouXXX.png", and the
 * temporary of one that a killed export left): their number
 * (0 also when dir does not exist), or -1 (errno) when dir cannot be read;
 * with remove, each is removed first (-1: one could not be). */
long tr_run_dir_overlays(const char *dir, int remove);

/* Appends "key=value\n" to the record *rec (malloc'd, *rec NULL to start);
 * value NULL stores an empty value.  0, or -1 when out of memory. */
int tr_run_rec_add(char **rec, const char *key, const char *value);

/* The value of key in rec, decoded into buf; NULL when rec lacks the key
 * (or the value does not fit in buf). */
const char *tr_run_rec_get(const char *rec, const char *key, char *buf, size_t buf_len);

#endif
