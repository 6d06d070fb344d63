#ifndef SHAREDSTORE_CLMDB_SHIM_H
#define SHAREDSTORE_CLMDB_SHIM_H
#include <lmdb.h>
#endif
