/*
 * deny_uffd CMD [ARGS...]: runs CMD with userfaultfd(2) denied (EPERM), the way Docker's default
 * seccomp profile denies it. The filter is inherited by every child, so a PostgreSQL server
 * started through it (pg_ctl start) cannot use userfaultfd: pg_scoot must fall back to the
 * software snapshot method and say why.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_userfaultfd, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};

	if (argc < 2)
	{
		fprintf(stderr, "usage: deny_uffd CMD [ARGS...]\n");
		return 2;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
		prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
	{
		perror("seccomp");
		return 1;
	}
	execvp(argv[1], argv + 1);
	perror("execvp");
	return 127;
}
