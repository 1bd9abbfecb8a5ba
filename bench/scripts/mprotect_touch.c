/* mprotect_touch.c - what an mprotect costs the next pass over its pages (session 9: the CPU
 * runner re-opens rotating timing sets before every sample). cc -O2 mprotect_touch.c && ./a.out
 * Result on this workplace's VM: bench/results/2026-11-28-cpu-runner-open-touch.txt. */
#include <stdio.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
__attribute__((noinline)) void fast_affine(const float *x, float *y, int n){for(int i=0;i<n;i++)y[i]=2.0f*x[i]+1.0f;}
int main(){int n=100000; size_t sz=4*(size_t)n; char *m=mmap(0,2*sz+8192,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
float *x=(float*)m,*y=(float*)(m+sz+4096); for(int i=0;i<n;i++){x[i]=i;y[i]=0;}
for(int mode=0;mode<3;mode++){ double tot=0; for(int r=0;r<20;r++){
  if(mode){mprotect(m,2*sz+8192,PROT_NONE);mprotect(m,2*sz+8192,PROT_READ|PROT_WRITE);}
  if(mode==2) for(size_t o=0;o<2*sz+8192;o+=4096) __atomic_fetch_or((uint32_t*)(m+o),0,__ATOMIC_RELAXED);
  double t=now(); fast_affine(x,y,n); tot+=now()-t;}
  printf("mode %d (%s): %.1f us per pass\n",mode,mode==0?"no mprotect":mode==1?"mprotect":"mprotect+touch",tot/20*1e6);}
}
