0
// kevo task deep
// kevo size M=-(-(-(-(1)))) N=M%-1+9223372036854775807/-1
// kevo output y i64[M]
// kevo bytes M*8
// kevo launch k grid=(M) block=((M),(M)) ()
