/* A stand-in for bcryptprimitives.dll, which Wine 8.0 lacks and every
 * Windows program built by Rust 1.78 or later imports (for ProcessPrng, the
 * source of HashMap seeds and random numbers). It forwards to
 * BCryptGenRandom, which Wine has. Used only to run the test programs under
 * Wine; a Windows machine has the real DLL. */
#include <windows.h>
#include <bcrypt.h>

#ifndef BCRYPT_USE_SYSTEM_PREFERRED_RNG
#define BCRYPT_USE_SYSTEM_PREFERRED_RNG 0x00000002
#endif

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (BCryptGenRandom(NULL, data, n, BCRYPT_USE_SYSTEM_PREFERRED_RNG) < 0)
            return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
