#ifndef SHAREDSTORE_CSQLITE_SHIM_H
#define SHAREDSTORE_CSQLITE_SHIM_H
#include <sqlite3.h>

/// SQLITE_TRANSIENT is a cast macro Swift cannot import.
static inline sqlite3_destructor_type sharedstore_sqlite_transient(void) {
    return SQLITE_TRANSIENT;
}

/// sqlite3_db_config is variadic, which Swift cannot call: turns off double-quoted string
/// literals in DML and DDL, so that a quoted name that is not a column is an error, never a
/// string ("kind" read as 'kind').
static inline int sharedstore_sqlite_strict_quotes(sqlite3 *db) {
    int rc = sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DML, 0, (int *)0);
    if (rc != SQLITE_OK) return rc;
    return sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DDL, 0, (int *)0);
}
#endif
