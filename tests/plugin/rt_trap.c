/* Linked into the test host: wrappers around the allocation, locking, waiting, file I/O and
 * printing calls that count those made on the thread inside run() (the host brackets each
 * run() with rt_trap_enter/leave). Defining them in the executable interposes them for the
 * plugin's shared object too (glibc's own internal calls to malloc go through the interposed
 * symbol as well). Only the host test uses this; the plugin never sees it. What it cannot see:
 * raw syscall() and inline atomics, which are not blocking calls anyway. */
/* Both names are wrapped explicitly, so the 64-bit renaming must not fold open into open64. */
#undef _FILE_OFFSET_BITS
#pragma GCC visibility push(default)
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <sys/mman.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

static atomic_int armed;
static pthread_t run_thread;
static atomic_long count;
static const char *_Atomic last = "";

void rt_trap_enter(void)
{
	run_thread = pthread_self();
	atomic_store(&armed, 1);
}

void rt_trap_leave(void) { atomic_store(&armed, 0); }
long rt_trap_count(void) { return atomic_load(&count); }
const char *rt_trap_last(void) { return atomic_load(&last); }

static void hit(const char *what)
{
	if (atomic_load_explicit(&armed, memory_order_relaxed) &&
	    pthread_equal(pthread_self(), run_thread)) {
		atomic_fetch_add(&count, 1);
		atomic_store(&last, what);
	}
}

void *malloc(size_t n) { hit("malloc"); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { hit("calloc"); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { hit("realloc"); return __libc_realloc(p, n); }
void free(void *p) { if (p) hit("free"); __libc_free(p); }
void *aligned_alloc(size_t a, size_t n) { hit("aligned_alloc"); return __libc_memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n)
{
	hit("posix_memalign");
	*out = __libc_memalign(a, n);
	return *out ? 0 : 12;
}

#define REAL(ret, name, args) \
	static ret(*real_##name) args; \
	if (!real_##name) \
		*(void **)&real_##name = dlsym(RTLD_NEXT, #name);

int pthread_mutex_lock(pthread_mutex_t *m)
{
	REAL(int, pthread_mutex_lock, (pthread_mutex_t *))
	hit("pthread_mutex_lock");
	return real_pthread_mutex_lock(m);
}

int pthread_mutex_trylock(pthread_mutex_t *m)
{
	REAL(int, pthread_mutex_trylock, (pthread_mutex_t *))
	hit("pthread_mutex_trylock");
	return real_pthread_mutex_trylock(m);
}

int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
	REAL(int, pthread_cond_wait, (pthread_cond_t *, pthread_mutex_t *))
	hit("pthread_cond_wait");
	return real_pthread_cond_wait(c, m);
}

int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t)
{
	REAL(int, pthread_cond_timedwait, (pthread_cond_t *, pthread_mutex_t *, const struct timespec *))
	hit("pthread_cond_timedwait");
	return real_pthread_cond_timedwait(c, m, t);
}

int pthread_rwlock_rdlock(pthread_rwlock_t *l)
{
	REAL(int, pthread_rwlock_rdlock, (pthread_rwlock_t *))
	hit("pthread_rwlock_rdlock");
	return real_pthread_rwlock_rdlock(l);
}

int pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
	REAL(int, pthread_rwlock_wrlock, (pthread_rwlock_t *))
	hit("pthread_rwlock_wrlock");
	return real_pthread_rwlock_wrlock(l);
}

int pthread_join(pthread_t t, void **r)
{
	REAL(int, pthread_join, (pthread_t, void **))
	hit("pthread_join");
	return real_pthread_join(t, r);
}

int sem_timedwait(sem_t *s, const struct timespec *t)
{
	REAL(int, sem_timedwait, (sem_t *, const struct timespec *))
	hit("sem_timedwait");
	return real_sem_timedwait(s, t);
}

int usleep(useconds_t us)
{
	REAL(int, usleep, (useconds_t))
	hit("usleep");
	return real_usleep(us);
}

int clock_nanosleep(clockid_t c, int flags, const struct timespec *a, struct timespec *b)
{
	REAL(int, clock_nanosleep, (clockid_t, int, const struct timespec *, struct timespec *))
	hit("clock_nanosleep");
	return real_clock_nanosleep(c, flags, a, b);
}

int sched_yield(void)
{
	REAL(int, sched_yield, (void))
	hit("sched_yield");
	return real_sched_yield();
}

void *mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
	REAL(void *, mmap, (void *, size_t, int, int, int, off_t))
	hit("mmap");
	return real_mmap(a, n, prot, flags, fd, off);
}

int munmap(void *a, size_t n)
{
	REAL(int, munmap, (void *, size_t))
	hit("munmap");
	return real_munmap(a, n);
}

int close(int fd)
{
	REAL(int, close, (int))
	hit("close");
	return real_close(fd);
}

int vfprintf(FILE *f, const char *fmt, va_list ap)
{
	REAL(int, vfprintf, (FILE *, const char *, va_list))
	hit("vfprintf");
	return real_vfprintf(f, fmt, ap);
}

int fprintf(FILE *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfprintf(f, fmt, ap);
	va_end(ap);
	return r;
}

int printf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfprintf(stdout, fmt, ap);
	va_end(ap);
	return r;
}

int puts(const char *s)
{
	REAL(int, puts, (const char *))
	hit("puts");
	return real_puts(s);
}

int fputs(const char *s, FILE *f)
{
	REAL(int, fputs, (const char *, FILE *))
	hit("fputs");
	return real_fputs(s, f);
}

int sem_wait(sem_t *s)
{
	REAL(int, sem_wait, (sem_t *))
	hit("sem_wait");
	return real_sem_wait(s);
}

int nanosleep(const struct timespec *a, struct timespec *b)
{
	REAL(int, nanosleep, (const struct timespec *, struct timespec *))
	hit("nanosleep");
	return real_nanosleep(a, b);
}

int open(const char *path, int flags, ...)
{
	REAL(int, open, (const char *, int, ...))
	va_list ap;
	va_start(ap, flags);
	int mode = va_arg(ap, int);
	va_end(ap);
	hit("open");
	return real_open(path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
	REAL(int, open64, (const char *, int, ...))
	va_list ap;
	va_start(ap, flags);
	int mode = va_arg(ap, int);
	va_end(ap);
	hit("open64");
	return real_open64(path, flags, mode);
}

ssize_t read(int fd, void *buf, size_t n)
{
	REAL(ssize_t, read, (int, void *, size_t))
	hit("read");
	return real_read(fd, buf, n);
}

ssize_t write(int fd, const void *buf, size_t n)
{
	REAL(ssize_t, write, (int, const void *, size_t))
	hit("write");
	return real_write(fd, buf, n);
}

FILE *fopen(const char *path, const char *mode)
{
	REAL(FILE *, fopen, (const char *, const char *))
	hit("fopen");
	return real_fopen(path, mode);
}

FILE *fopen64(const char *path, const char *mode)
{
	REAL(FILE *, fopen64, (const char *, const char *))
	hit("fopen64");
	return real_fopen64(path, mode);
}

size_t fwrite(const void *p, size_t a, size_t b, FILE *f)
{
	REAL(size_t, fwrite, (const void *, size_t, size_t, FILE *))
	hit("fwrite");
	return real_fwrite(p, a, b, f);
}

size_t fread(void *p, size_t a, size_t b, FILE *f)
{
	REAL(size_t, fread, (void *, size_t, size_t, FILE *))
	hit("fread");
	return real_fread(p, a, b, f);
}
#pragma GCC visibility pop
