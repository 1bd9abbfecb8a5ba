0
// kevo task near
// kevo size M=64 N=32
// kevo size M=1 K=2
// kevo holdout N=1
// kevo inptu x f33[M,N normal(0,1
// kevo output y f32[M,N] uniform(0,1)
// kevo tol z rtol=1 atol=-1
// kevo tol rtol=1
// kevo scalar s i8 300
//kevo call f(x)
// kevo
