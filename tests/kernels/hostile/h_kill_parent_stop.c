/* Hostile: a correct kernel whose first call sends SIGSTOP to its parent process (kill_parent.h).
 * Expect: exit 1; mentions: forbidden system call
 */
#include <signal.h>
#define HOSTILE_SIGNAL SIGSTOP
#include "kill_parent.h"
