// The compiled units of the library's heaviest instantiations, for programs of many files (opt-in;
// docs/using.md), one per module: law (the fitter and the registry, law/instances.cpp) and train
// (the host engine and train::train, train/instances.cpp). Each header that has such an
// instantiation lists it once, after its template, as `LOOPSCALE_LAW_INSTANCE <declaration>;`
// (or TRAIN) inside `#ifdef LOOPSCALE_LAW_INSTANCE`:
//   - LOOPSCALE_EXTERN_LAW defined (the CMake target loopscale::law_instances defines it): the
//     lines are explicit instantiation declarations (extern template), so a file that fits a law
//     does not compile the fitter again;
//   - LOOPSCALE_INSTANTIATE_LAW defined (in law/instances.cpp, the one file that target adds to a
//     program): the lines are their definitions;
//   - neither (the default): the lines are absent and every file instantiates what it uses, as any
//     header-only library's user does.
// The same for train: LOOPSCALE_EXTERN_TRAIN, LOOPSCALE_INSTANTIATE_TRAIN, loopscale::train_instances.
#pragma once

#if defined(LOOPSCALE_INSTANTIATE_LAW)
#define LOOPSCALE_LAW_INSTANCE template
#elif defined(LOOPSCALE_EXTERN_LAW)
#define LOOPSCALE_LAW_INSTANCE extern template
#endif

#if defined(LOOPSCALE_INSTANTIATE_TRAIN)
#define LOOPSCALE_TRAIN_INSTANCE template
#elif defined(LOOPSCALE_EXTERN_TRAIN)
#define LOOPSCALE_TRAIN_INSTANCE extern template
#endif
