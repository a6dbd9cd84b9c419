#ifndef CMALLOCTUNING_H
#define CMALLOCTUNING_H

/// The malloc settings downloadsd runs with (see CMallocTuning.c). They are made by a
/// constructor, before the Swift runtime and any thread start; this returns whether glibc took
/// all of them (the daemon logs it), and referring to it keeps the constructor linked.
int downloadsd_malloc_tuned(void);

/// Gives the system back the free memory inside the heap, not only at its top (`malloc_trim(0)`):
/// called after a large call (a StartGroup) whose decoded message and working copies were freed
/// among the records that stay.
void downloadsd_release_free_memory(void);

#endif
