/* Hostile: a correct kernel whose constructor never returns: loading must have a timeout too, not
 * only the calls. (pause() sleeps, so a hang costs no CPU; SIGINT/SIGTERM still end it by hand.)
 * Expect: exit 2; mentions: while loading
 */
#include <unistd.h>

#include "../mutants/mutant_common.h"

__attribute__((constructor)) static void h_hang_on_load(void) {
  for (;;) pause();
}
