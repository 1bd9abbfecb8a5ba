2
// kevo size M=1 N=2
// kevo param x 1 2
// kevo param T 1 1
// kevo scratch y f32[T]
// kevo flags -O3 -maxrregcount=300
// kevo launch k grid=((((((((M)))))))) block=min(max(cdiv(T,-1),1),-9223372036854775807-1) (x, junk, , 1 2)
