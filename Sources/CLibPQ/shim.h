#ifndef SHAREDSTORE_CLIBPQ_SHIM_H
#define SHAREDSTORE_CLIBPQ_SHIM_H
// libpq, PostgreSQL's C client (Debian's libpq-dev; pkg-config libpq gives its include path).
#include <libpq-fe.h>
#endif
